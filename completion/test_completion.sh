#!/bin/bash
# test_completion.sh DIR - the completions offer the real subcommands and
# options: `ember al<TAB>`, `emberctl la<TAB>`, `ember align --pla<TAB>`,
# `ember align --platform f<TAB>`, `ember ln<TAB>`, `ember lnl --max<TAB>`,
# `ember lnl --precision s<TAB>`, `ember tr<TAB>`, `ember train --micro<TAB>`.
set -eu
dir=$1
. "$dir/ember.bash"
. "$dir/emberctl.bash"
complete_words() { # function, words...
  local fn=$1; shift
  COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
  "$fn"
  echo "${COMPREPLY[*]}"
}
fail=0
expect() { # got, want
  if [ "$1" != "$2" ]; then echo "got '$1', want '$2'"; fail=1; fi
}
expect "$(complete_words _ember ember al)" "align"
expect "$(complete_words _ember ember align --pla)" "--platform"
expect "$(complete_words _ember ember align --platform f)" "fpga-emu"
expect "$(complete_words _ember ember acc)" "accelerators"
expect "$(complete_words _ember ember bea)" "beagle"
expect "$(complete_words _ember ember beagle --emb)" "--embedded"
expect "$(complete_words _ember ember beagle --print)" "--print-libdir"
expect "$(complete_words _ember ember ln)" "lnl"
expect "$(complete_words _ember ember lnl --max)" "--max-vectors"
expect "$(complete_words _ember ember lnl --site)" "--site-lnl"
expect "$(complete_words _ember ember lnl --precision s)" "single"
expect "$(complete_words _ember ember lnl --type p)" "protein"
expect "$(complete_words _ember ember tr)" "train"
expect "$(complete_words _ember ember train --micro)" "--micro-batch"
expect "$(complete_words _ember ember train --pl)" "--platform --plan --plot"
expect "$(complete_words _ember ember help tr)" "train"
expect "$(complete_words _emberctl emberctl la)" "label"
expect "$(complete_words _emberctl emberctl label a)" "add"
expect "$(complete_words _emberctl emberctl --json ev)" "events"
[ $fail = 0 ] && echo "completions: ember and emberctl offer what their --help lists"
exit $fail
