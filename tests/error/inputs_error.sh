#!/usr/bin/env bash
# Error tests for `kintsugi run --inputs DIR [--reference DIR]`: each case damages a set of inputs
# saved by --save-io (or gives a bad reference) and checks that the run fails with exit code 1 and
# a message naming the file and what was expected. Usage: inputs_error.sh KINTSUGI CASE
set -u
kintsugi="$1"
case_name="$2"
example="$(dirname "$0")/../../examples/norm/rmsnorm_quant.te"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$kintsugi" run "$example" --shape M=4,N=16 --save-io "$dir/good" >/dev/null || { echo "FAIL: setup"; exit 1; }
mkdir "$dir/bad"
cp "$dir/good/"*.npy "$dir/bad/"
args=(--inputs "$dir/bad")
case "$case_name" in
  reference_without_inputs)
    args=(--reference "$dir/good")
    expect="--reference $dir/good needs --inputs: the reference must be computed from the same inputs" ;;
  reference_not_float64)
    args=(--inputs "$dir/good" --reference "$dir/good")  # the saved outputs are f32 / i8
    expect="holds dtype '<f4' but float64 data is needed ('<f8')" ;;
  missing)
    rm "$dir/bad/Wt.npy"
    expect="input 'Wt' (f16) needs the file $dir/bad/Wt.npy, which does not exist" ;;
  wrong_shape)
    cp "$dir/good/X.npy" "$dir/bad/Wt.npy"   # [4, 16] where [16] is needed
    expect="Wt.npy has 2 dimensions but input 'Wt' is f16[N]" ;;
  wrong_extent)
    "$kintsugi" run "$example" --shape M=4,N=8 --save-io "$dir/other" >/dev/null
    cp "$dir/other/Wt.npy" "$dir/bad/Wt.npy"  # [8] where N = 16 from X.npy
    expect="Wt.npy has extent 8 in dimension 0 (N), but N = 16 from $dir/bad/X.npy" ;;
  wrong_dtype)
    cp "$dir/good/scale.npy" "$dir/bad/Wt.npy"  # f32 data where f16 is needed
    expect="Wt.npy holds dtype '<f4' but f16 data is needed ('<f2')" ;;
  truncated)
    head -c 164 "$dir/good/X.npy" > "$dir/bad/X.npy"  # 128-byte header, 36 of 128 data bytes
    expect="X.npy is truncated: its shape needs 128 bytes of data but the file has 36" ;;
  truncated_header)
    head -c 100 "$dir/good/X.npy" > "$dir/bad/X.npy"
    expect="X.npy is truncated inside its header" ;;
  not_npy)
    echo "hello" > "$dir/bad/X.npy"
    expect="X.npy is not a .npy file" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
stderr=$("$kintsugi" run "$example" "${args[@]}" 2>&1 >/dev/null)
code=$?
[ $code -eq 1 ] || { echo "FAIL: exit code $code, expected 1"; echo "$stderr"; exit 1; }
[[ "$stderr" == *"$expect"* ]] || { echo "FAIL: message does not contain: $expect"; echo "$stderr"; exit 1; }
echo "ok: $case_name: $stderr"
