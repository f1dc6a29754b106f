#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs each libFuzzer harness of tests/fuzz (built by `make fuzz` into
# build/fuzz) for SECONDS (default 60), prints the runs each made, and
# exits non-zero when one crashed. Inputs that crash are written to
# build/fuzz/artifacts/; the corpora grow in build/fuzz/corpus/.
#   scripts/fuzz.sh [SECONDS]
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
out=build/fuzz
harnesses=(term uid uri resp history jwt)

# The term harness starts from real encoded terms: written by a real node.
if ! escript tests/fuzz/term_seeds.escript "$out/seeds/term"; then
  echo "fuzz: cannot write the term seeds (is erlang-nox installed? run 'make deps')" >&2
  exit 1
fi

failed=0
for h in "${harnesses[@]}"; do
  mkdir -p "$out/corpus/$h" "$out/artifacts"
  dirs=("$out/corpus/$h")
  for d in "$out/seeds/$h" "tests/fuzz/seeds/$h"; do
    [[ -d $d ]] && dirs+=("$d")
  done
  log=$out/$h.log
  echo "== fuzz_$h: $seconds s (log: $log)"
  timeout --kill-after=10 $((seconds + 120)) "$out/fuzz_$h" -max_total_time="$seconds" \
    -artifact_prefix="$out/artifacts/$h-" "${dirs[@]}" >"$log" 2>&1
  rc=$?
  grep -E '^#[0-9]+[[:space:]]+DONE|^Done [0-9]+ runs' "$log"
  if [[ $rc -ne 0 ]]; then
    failed=$((failed + 1))
    echo "fuzz_$h FAILED (exit $rc); its report:"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -20
  fi
done

echo "fuzz: ${#harnesses[@]} harnesses, $failed failed"
[[ $failed -eq 0 ]]
