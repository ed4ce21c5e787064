#!/usr/bin/env bash
# Error tests for the limits of a program and of its sizes: each case generates a program too
# deep, too large or too big to run (long arithmetic chains in every kind of expression, deep
# parentheses, high ranks, many definitions, sizes whose element or byte counts overflow) and
# checks that Kintsugi refuses it as a user error: exit code 1 and the expected message, never a
# crash (a stack overflow is a signal, exit code >= 128) or an internal error (exit code 2).
# Usage: limits_error.sh KINTSUGI CASE
set -u
kintsugi="$1"
case_name="$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
file="$dir/$case_name.te"
# chain N TERM: "TERM + TERM + ... + TERM" with N terms
chain() { python3 -c "import sys; print(' + '.join([sys.argv[2]] * int(sys.argv[1])))" "$1" "$2"; }
args=(check)
case "$case_name" in
  chain_input_shape)
    printf 'input X: f32[%s]\noutput y[i]: f32 = X[i]\n' "$(chain 12500 N)" > "$file"
    expect="expression more than 1000 operations deep" ;;
  chain_declared_shape)
    printf 'input X: f32[N]\noutput y[i]: f32[%s] = X[i]\n' "$(chain 12500 N)" > "$file"
    expect="expression more than 1000 operations deep" ;;
  chain_reduce_extent)
    printf 'input X: f32[N]\noutput y[]: f32 = sum[k: %s](X[k %% N])\n' "$(chain 5000 N)" > "$file"
    expect="expression more than 1000 operations deep" ;;
  chain_index_extent)
    printf 'input X: f32[N]\noutput y[i: %s]: f32 = X[i %% N]\n' "$(chain 5000 N)" > "$file"
    expect="expression more than 1000 operations deep" ;;
  chain_index)
    printf 'input X: f32[N]\noutput y[i]: f32 = X[(%s) %% N]\n' "$(chain 12500 i)" > "$file"
    expect="expression more than 1000 operations deep" ;;
  chain_body_100k)
    printf 'input X: f32[N]\noutput y[i]: f32 = %s\n' "$(chain 100000 'X[i]')" > "$file"
    expect="expression more than 1000 operations deep" ;;
  parens_100k)
    python3 -c "print('input X: f32[N]\noutput y[i]: f32 = ' + '(' * 100000 + 'X[i]' + ')' * 100000)" > "$file"
    expect="expression nested more than 256 levels deep" ;;
  negations_100k)
    python3 -c "print('input X: f32[N]\noutput y[i]: f32 = ' + '-' * 100000 + 'X[i]')" > "$file"
    expect="expression nested more than 256 levels deep" ;;
  wide_statement)
    # shallow (depth about 100) but 30,000 operations
    python3 -c "
t = ' + '.join(['X[i]'] * 100)
print('input X: f32[N]\noutput y[i]: f32 = ' + ' + '.join(['(' + t + ')'] * 300))" > "$file"
    expect="program with more than 20000 operations" ;;
  rank_1000)
    python3 -c "
d = ', '.join('D%d' % k for k in range(1000)); i = ', '.join('x%d' % k for k in range(1000))
print('input X: f32[%s]\noutput y[%s]: f32 = X[%s]' % (d, i, i))" > "$file"
    expect="input 'X' has rank 1000; at most 16 dimensions are supported" ;;
  many_operations)
    # 100 definitions of 250 operations each: each is fine, the program is too large
    python3 -c "
t = ' + '.join(['X[i]'] * 250)
print('input X: f32[N]\nd0[i] = ' + t)
for k in range(1, 100): print('d%d[i] = d%d[i] + %s' % (k, k - 1, t))
print('output y[i]: f32 = d99[i]')" > "$file"
    expect="program with more than 20000 operations" ;;
  definitions_2000)
    python3 -c "
print('input X: f32[N]\nd0[i] = X[i]')
for k in range(1, 2000): print('d%d[i] = d%d[i] + 1.0' % (k, k - 1))
print('output y[i]: f32 = d1999[i]')" > "$file"
    expect="more than 128 definitions in one program" ;;
  shape_2_62)
    printf 'input X: f32[N]\noutput y[i]: f32 = X[i]\n' > "$file"
    args=(run --target cpu --shape N=4611686018427387904)
    expect="is too large: 4611686018427387904 elements of 4 bytes exceed 2^62 bytes" ;;
  shape_2_62_minus_1)
    printf 'input X: f32[N]\noutput y[i]: f32 = X[i]\n' > "$file"
    args=(run --target cpu --shape N=4611686018427387903)
    expect="is too large: 4611686018427387903 elements of 4 bytes exceed 2^62 bytes" ;;
  shape_2_36)
    printf 'input X: f32[N]\noutput y[i]: f32 = X[i]\n' > "$file"
    args=(run --target cpu --shape N=68719476736)
    vmem_kb=8388608  # 8 GiB of address space: the 256 GiB allocation fails on any machine
    expect="cannot allocate input 'X' f32[68719476736]: 274877906944 bytes" ;;
  shape_product)
    printf 'input X: f32[M, N]\noutput y[i, j]: f32 = X[i, j]\n' > "$file"
    args=(run --target cpu --shape M=4294967296,N=4294967296)
    expect="input 'X' of shape [4294967296, 4294967296] is too large: its element count exceeds 2^62" ;;
  npy_2_62)
    printf 'input X: f32[N]\noutput y[i]: f32 = X[i]\n' > "$file"
    mkdir "$dir/in"
    python3 -c "
import struct, sys
h = \"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }\"
h += ' ' * (118 - len(h)) + '\n'
sys.stdout.buffer.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode())" > "$dir/in/X.npy"
    args=(run --target cpu --inputs "$dir/in")
    expect="X.npy: the array of shape [4611686018427387904] is too large" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
stderr=$(ulimit -s 8192; [ -n "${vmem_kb:-}" ] && ulimit -v "$vmem_kb"; "$kintsugi" "${args[@]}" "$file" 2>&1 >/dev/null)
code=$?
[ $code -eq 1 ] || { echo "FAIL: exit code $code, expected 1"; echo "${stderr:0:2000}"; exit 1; }
[[ "$stderr" == *"$expect"* ]] || { echo "FAIL: message does not contain: $expect"; echo "${stderr:0:2000}"; exit 1; }
[[ "$stderr" == *"$file:"*": error: "* || "${args[0]}" == run ]] || { echo "FAIL: no source location"; echo "${stderr:0:2000}"; exit 1; }
echo "ok: $case_name: ${stderr:0:300}"
