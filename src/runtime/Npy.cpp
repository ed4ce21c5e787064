// \file Npy.cpp
// NumPy .npy reading and writing (see Npy.h).
#include "runtime/Npy.h"

#include <cstring>
#include <limits>
#include <sstream>

#include "support/Error.h"
#include "support/Files.h"

namespace kintsugi::runtime {

std::string npy_descr(DType t) {
  switch (t) {
    case DType::F16:
      return "<f2";
    case DType::BF16:
      return "<u2";
    case DType::F8E4M3:
    case DType::F8E5M2:
      return "|u1";
    case DType::F32:
      return "<f4";
    case DType::I32:
      return "<i4";
    case DType::I8:
      return "|i1";
    default:
      internal_error << "no .npy encoding for " << dtype_name(t);
  }
  return "";
}

void write_npy(const std::string& path, const Tensor& t) {
  std::ostringstream dict;
  dict << "{'descr': '" << npy_descr(t.dtype) << "', 'fortran_order': False, 'shape': (";
  for (size_t k = 0; k < t.shape.size(); ++k)
    dict << t.shape[k] << (t.shape.size() == 1 || k + 1 < t.shape.size() ? ", " : "");
  dict << "), }";
  std::string header = dict.str();
  // Pad with spaces so that magic (6) + version (2) + length (2) + header + '\n' is a multiple
  // of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string bytes("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  bytes.push_back(static_cast<char>(len & 0xff));
  bytes.push_back(static_cast<char>(len >> 8));
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  files::write_file_atomic(path, bytes, "writing .npy");
}

namespace {

// Finds `'key': value` in the header dictionary and returns the raw value text.
std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  std::string k = "'" + key + "'";
  size_t p = header.find(k);
  if (p == std::string::npos)
    arg_error << path << ": malformed .npy header: no '" << key << "' entry";
  p = header.find(':', p + k.size());
  if (p == std::string::npos) arg_error << path << ": malformed .npy header near '" << key << "'";
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  size_t end = p;
  if (p < header.size() && header[p] == '(') {
    end = header.find(')', p);
    if (end == std::string::npos)
      arg_error << path << ": malformed .npy header: unterminated shape";
    return header.substr(p, end - p + 1);
  }
  if (p < header.size() && header[p] == '\'') {
    end = header.find('\'', p + 1);
    if (end == std::string::npos)
      arg_error << path << ": malformed .npy header: unterminated string";
    return header.substr(p + 1, end - p - 1);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  return header.substr(p, end - p);
}

}  // namespace

namespace {

// A validated .npy file: its shape and where its data starts in `bytes`.
struct RawNpy {
  std::string bytes;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
};

// Reads and validates a file whose elements must have descriptor `want` (`elem_bytes` each);
// `needed` says what the caller needs, for the error message.
RawNpy read_raw(const std::string& path, const std::string& want, size_t elem_bytes,
                const std::string& needed) {
  std::string bytes =
      files::read_regular_file(path, "a .npy file", std::numeric_limits<size_t>::max());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    arg_error << path << " is not a .npy file (bad magic or truncated header)";
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) arg_error << path << " is truncated inside its header";
    for (int k = 0; k < 4; ++k)
      header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + k])) << (8 * k);
    offset = 12;
  } else {
    arg_error << path << ": unsupported .npy format version " << major;
  }
  if (bytes.size() < offset + header_len) arg_error << path << " is truncated inside its header";
  std::string header = bytes.substr(offset, header_len);
  std::string descr = dict_value(header, "descr", path);
  std::string fortran = dict_value(header, "fortran_order", path);
  std::string shape_text = dict_value(header, "shape", path);
  if (fortran.find("False") == std::string::npos)
    arg_error << path
              << " is stored in Fortran order; save it in C order (numpy.ascontiguousarray)";
  // '=' and '<' are the same on little-endian hosts; single-byte types may use '|'.
  std::string norm = descr;
  if (!norm.empty() && (norm[0] == '=' || norm[0] == '|' || norm[0] == '<')) norm[0] = want[0];
  if (norm != want)
    arg_error << path << " holds dtype '" << descr << "' but " << needed << " is needed ('" << want
              << "'"
              << (want == "<u2"   ? ", the raw bf16 bit patterns as uint16"
                  : want == "|u1" ? ", the raw fp8 bit patterns as uint8"
                                  : "")
              << ")";
  std::vector<int64_t> shape;
  {
    if (shape_text.size() < 2 || shape_text.front() != '(' || shape_text.back() != ')')
      arg_error << path << ": malformed shape in .npy header";
    std::stringstream ss(shape_text.substr(1, shape_text.size() - 2));
    std::string item;
    while (std::getline(ss, item, ',')) {
      size_t b = item.find_first_not_of(' ');
      if (b == std::string::npos) continue;
      item = item.substr(b);
      size_t e = item.find_last_not_of(' ');
      item = item.substr(0, e + 1);
      size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(item, &used);
      } catch (...) {
        used = 0;
      }
      if (used != item.size() || v < 0)
        arg_error << path << ": malformed shape entry '" << item << "' in .npy header";
      shape.push_back(v);
    }
  }
  // Check the size before allocating: a corrupt header may claim an absurd shape.
  size_t data_bytes = static_cast<size_t>(
      checked_bytes(shape, static_cast<int64_t>(elem_bytes), path + ": the array"));
  size_t available = bytes.size() - offset - header_len;
  if (available < data_bytes)
    arg_error << path << " is truncated: its shape needs " << data_bytes
              << " bytes of data but the file has " << available;
  if (available > data_bytes)
    arg_error << path << " has " << (available - data_bytes)
              << " bytes after the data its header describes";
  return RawNpy{std::move(bytes), shape, offset + header_len};
}

}  // namespace

Tensor read_npy(const std::string& path, DType expected) {
  RawNpy raw = read_raw(path, npy_descr(expected), static_cast<size_t>(dtype_bytes(expected)),
                        std::string(dtype_name(expected)) + " data");
  Tensor t(expected, raw.shape, path);
  std::memcpy(t.data.data(), raw.bytes.data() + raw.data_offset, t.data.size());
  return t;
}

std::vector<double> read_npy_f64(const std::string& path, std::vector<int64_t>* shape) {
  RawNpy raw = read_raw(path, "<f8", 8, "float64 data");
  *shape = raw.shape;
  std::vector<double> out(static_cast<size_t>(checked_numel(raw.shape, path)));
  std::memcpy(out.data(), raw.bytes.data() + raw.data_offset, out.size() * sizeof(double));
  return out;
}

}  // namespace kintsugi::runtime
