#!/usr/bin/env bash
# Error tests for the files Kintsugi reads and writes: .te sources and .npy inputs that are not
# regular files, long source lines in messages, --save-io into non-empty directories and through
# symbolic links, the kernel disk cache (damaged entries, unusable and foreign directories,
# entries planted by another user), the host compiler's time limit, and the `tune` stub. Each case
# must end in a clean result: exit code 0 where the input is fine (the cache is rebuilt or not
# used), else exit code 1 and a message naming the path; never a crash, a hang or exit code 2.
# Usage: files_error.sh KINTSUGI CASE. Cases that need root (to act as another user) exit 77
# (skipped) when not run as root.
set -u
kintsugi="$1"
case_name="$2"
example="$(cd "$(dirname "$0")/../../examples/norm" && pwd)/rmsnorm_quant.te"
dir=$(mktemp -d)
chmod 755 "$dir"
trap 'rm -rf "$dir"' EXIT
export KINTSUGI_CACHE_DIR="$dir/cache"
export TMPDIR="$dir/tmp"
mkdir -p "$TMPDIR"

fail() { echo "FAIL: $case_name: $1"; echo "--- stderr:"; echo "${stderr:-}" | head -c 4000; exit 1; }
# run EXPECTED_CODE ARGS...: runs kintsugi (at most 60 s), keeps stderr and stdout.
run() {
  local want="$1"
  shift
  stderr=$(timeout 60 "$kintsugi" "$@" 2>&1 >"$dir/stdout")
  code=$?
  stdout=$(cat "$dir/stdout")
  [ "$code" -eq "$want" ] || fail "exit code $code, expected $want: kintsugi $*"
}
expect() { [[ "$stderr" == *"$1"* ]] || fail "message does not contain: $1"; }
run_small() { run "$1" run "$example" --shape M=4,N=16 --json "${@:2}"; }
cached_so() { ls "$KINTSUGI_CACHE_DIR"/*.so 2>/dev/null | head -1; }
need_root() { [ "$(id -u)" -eq 0 ] || { echo "skipped: $case_name needs root"; exit 77; }; }

case "$case_name" in
  source_directory)
    run 1 check "$dir"
    expect "'$dir' is a directory, not a .te source" ;;
  source_device)
    run 1 check /dev/zero
    expect "'/dev/zero' is a device, not a .te source" ;;
  source_fifo)
    mkfifo "$dir/p.te"
    run 1 lower "$dir/p.te"
    expect "'$dir/p.te' is a pipe, not a .te source" ;;
  source_too_large)
    truncate -s 17M "$dir/big.te"
    run 1 check "$dir/big.te"
    expect "'$dir/big.te' is too large for a .te source: 17825792 bytes, at most 16 MiB are read" ;;
  long_line)
    # One 3 MB line with a bad character in its middle.
    { echo "input X: f32[N]"; printf 'output y[i]: f32 = X[i] + %*s$ 2 + %*s1\n' 1500000 "" 1500000 ""; } > "$dir/long.te"
    run 1 check "$dir/long.te"
    expect "$dir/long.te:2:1500027: error: unexpected character '\$'"
    [ "${#stderr}" -lt 600 ] || fail "the message has ${#stderr} bytes"
    src=$(echo "$stderr" | sed -n 2p)
    caret=$(echo "$stderr" | sed -n 3p)
    [[ "$src" == "..."*"..." ]] || fail "the source window is not marked with ... on both sides"
    [ "${caret: -1}" = "^" ] && [ "${src:${#caret}-1:1}" = '$' ] || fail "the caret is not under the '\$'" ;;
  inputs_directory)
    run_small 0 --save-io "$dir/io"
    rm "$dir/io/X.npy"
    mkdir -p "$dir/io/X.npy/sub"
    run 1 run "$example" --inputs "$dir/io"
    expect "'$dir/io/X.npy' is a directory, not a .npy file" ;;
  inputs_fifo)
    run_small 0 --save-io "$dir/io"
    rm "$dir/io/Wt.npy"
    mkfifo "$dir/io/Wt.npy"
    run 1 run "$example" --inputs "$dir/io"
    expect "'$dir/io/Wt.npy' is a pipe, not a .npy file" ;;
  save_io_not_empty)
    run_small 0 --save-io "$dir/io"
    run_small 1 --save-io "$dir/io" --seed 2
    expect "--save-io $dir/io: the directory exists and is not empty"
    run_small 0 --save-io "$dir/io" --seed 2 --force
    run 1 run "$example" --force
    expect "--force applies to --save-io only" ;;
  save_io_symlink)
    mkdir "$dir/io"
    echo "precious" > "$dir/outside"
    ln -s "$dir/outside" "$dir/io/scale.npy"
    ln -s "$dir/outside" "$dir/io/manifest.json"
    run_small 0 --save-io "$dir/io" --force
    [ "$(cat "$dir/outside")" = "precious" ] || fail "the file behind the symbolic link was overwritten"
    [ -f "$dir/io/scale.npy" ] && [ ! -L "$dir/io/scale.npy" ] || fail "scale.npy is not a regular file"
    [ -f "$dir/io/manifest.json" ] && [ ! -L "$dir/io/manifest.json" ] || fail "manifest.json is not a regular file"
    ls "$dir/io" | grep -q tmp && fail "temporary files left: $(ls "$dir/io")"
    run 0 run "$example" --inputs "$dir/io" ;;
  tune)
    run 1 tune "$example"
    expect "kintsugi tune: not available yet" ;;
  cache_entry_directory)
    run_small 0
    so=$(cached_so)
    [ -n "$so" ] || fail "no cache entry written"
    rm "$so"
    mkdir -p "$so/inside"
    run_small 0
    [ -f "$so" ] || fail "the entry was not rebuilt"
    run_small 0
    [[ "$stdout" == *'"from_cache":true'* ]] || fail "the rebuilt entry is not used: $stdout" ;;
  cache_entry_symlink)
    run_small 0
    so=$(cached_so)
    mv "$so" "$dir/elsewhere.so"
    ln -s "$dir/elsewhere.so" "$so"
    run_small 0
    [[ "$stdout" == *'"from_cache":false'* ]] || fail "an entry that is a symbolic link was used"
    [ -f "$so" ] && [ ! -L "$so" ] || fail "the link was not replaced by a rebuilt entry" ;;
  cache_entry_damaged)
    run_small 0
    so=$(cached_so)
    meta="${so%.so}.meta"
    echo "garbage" > "$meta"
    run_small 0
    [[ "$stdout" == *'"from_cache":false'* ]] || fail "an entry with a bad meta file was used"
    head -c 1000 "$so" > "$dir/t" && cat "$dir/t" > "$so"
    run_small 0
    [[ "$stdout" == *'"from_cache":false'* ]] || fail "a truncated entry was used"
    rm "$meta"
    mkdir -p "$meta/x"
    run_small 0
    run_small 0
    [[ "$stdout" == *'"from_cache":true'* ]] || fail "the cache did not recover" ;;
  cache_unusable)
    # The cache directory cannot be created: the per-user one in TMPDIR is used instead.
    touch "$dir/file"
    export KINTSUGI_CACHE_DIR="$dir/file/cache"
    run_small 0
    expect "the kernel cache '$dir/file/cache': cannot create it"
    expect "using $TMPDIR/kintsugi-cache-$(id -u)"
    # Nor that one: compiled without a cache, with a warning.
    rm -rf "$TMPDIR/kintsugi-cache-$(id -u)"
    touch "$TMPDIR/kintsugi-cache-$(id -u)"
    run_small 0
    expect "warning: CPU back end: compiling without a kernel cache"
    [[ "$stdout" == *'"program":"rmsnorm_quant"'* ]] || fail "no result: $stdout" ;;
  cache_tmpdir_unwritable)
    # A usable cache and a TMPDIR that does not exist: the compiler's temporary files go to a
    # private directory in the cache.
    export TMPDIR="$dir/missing"
    run_small 0
    # Neither a cache nor a temporary directory: a clean error.
    export KINTSUGI_CACHE_DIR="$dir/missing/cache"
    touch "$dir/missing"
    run_small 1
    expect "cannot create a directory to compile in: the temporary directory '$dir/missing'" ;;
  cache_world_writable)
    mkdir -m 700 "$KINTSUGI_CACHE_DIR"
    chmod 777 "$KINTSUGI_CACHE_DIR"
    run_small 0
    expect "'$KINTSUGI_CACHE_DIR': it is writable by its group or by others (mode 0777"
    [ -z "$(ls "$KINTSUGI_CACHE_DIR")" ] || fail "the refused directory was written into" ;;
  cache_foreign_directory)
    need_root
    mkdir "$KINTSUGI_CACHE_DIR"
    chown 65534:65534 "$KINTSUGI_CACHE_DIR"
    run_small 0
    expect "'$KINTSUGI_CACHE_DIR': it is owned by another user (uid 65534"
    [ -z "$(ls "$KINTSUGI_CACHE_DIR")" ] || fail "the refused directory was written into" ;;
  cache_foreign_entry)
    need_root
    run_small 0
    so=$(cached_so)
    chown 65534 "$so"
    run_small 0
    [[ "$stdout" == *'"from_cache":false'* ]] || fail "an entry owned by another user was used"
    [ "$(stat -c %u "$so")" = 0 ] || fail "the foreign entry was not replaced" ;;
  cache_planted)
    # Another user prepares the shared fallback directory $TMPDIR/kintsugi-cache-0 and plants the
    # object of the kernel we are about to compile, with a valid meta file. It must never run.
    need_root
    chmod 1777 "$TMPDIR"
    run_small 0  # learn the entry's name and meta format from a private cache
    so=$(basename "$(cached_so)")
    key="${so%.so}"
    printf '#include <stdio.h>\n__attribute__((constructor)) static void planted(void) { FILE* f = fopen("%s", "w"); if (f) fclose(f); }\n' "$dir/planted-ran" > "$dir/planted.c"
    cc -shared -fPIC "$dir/planted.c" -o "$dir/planted.so" || fail "cannot build the planted object"
    chmod 755 "$dir/planted.so"
    fallback="$TMPDIR/kintsugi-cache-0"
    setpriv --reuid=65534 --regid=65534 --clear-groups bash -c "mkdir -m 755 '$fallback' && cp '$dir/planted.so' '$fallback/$so'" || fail "cannot plant as another user"
    python3 - "$fallback/$so" "$key" "$(head -1 "$KINTSUGI_CACHE_DIR/$key.meta")" > "$dir/planted.meta" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
h = 1469598103934665603
for b in data:
    h = ((h ^ b) * 1099511628211) % (1 << 64)
print(f"{sys.argv[3]}\nkey {sys.argv[2]}\nsize {len(data)}\nhash {h:016x}")
PY
    setpriv --reuid=65534 --regid=65534 --clear-groups cp "$dir/planted.meta" "$fallback/$key.meta"
    touch "$dir/file"
    export KINTSUGI_CACHE_DIR="$dir/file/cache"  # unusable: the fallback would be used
    run_small 0
    [ ! -e "$dir/planted-ran" ] || fail "the planted object was loaded"
    expect "'$fallback': it is owned by another user (uid 65534" ;;
  compile_timeout)
    # A host compiler that hangs on the kernel (but answers --version and the probe).
    mkdir "$dir/bin"
    cat > "$dir/bin/c++" <<SH
#!/usr/bin/env bash
case "\$*" in
  *--version*|*probe-*) exec /usr/bin/c++ "\$@" ;;
esac
sleep 300 &
echo \$! > "$dir/compiler.pid"
wait
SH
    chmod +x "$dir/bin/c++"
    start=$(date +%s)
    PATH="$dir/bin:$PATH" KINTSUGI_COMPILE_TIMEOUT=2 run_small 1
    expect "CPU back end: the host compiler exceeded the time limit of 2 s"
    expect "KINTSUGI_COMPILE_TIMEOUT"
    [ $(( $(date +%s) - start )) -lt 30 ] || fail "the time limit was not enforced"
    sleep 0.5
    pid=$(cat "$dir/compiler.pid")
    # Gone, or a zombie that nobody reaps (PID 1 of a container may not).
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
    [ -z "$state" ] || [ "$state" = Z ] || { kill "$pid"; fail "the compiler process was left running"; }
    KINTSUGI_COMPILE_TIMEOUT=soon run_small 1
    expect "KINTSUGI_COMPILE_TIMEOUT='soon' must be a number of seconds" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "ok: $case_name"
