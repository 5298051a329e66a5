#!/bin/bash
# test_completion.sh DIR EMBER EMBERCTL - the completions in DIR offer what
# the binaries' own --help prints, nothing more and nothing less:
#   ember <TAB>             the commands of `ember --help`
#   ember help <TAB>        the same, but help itself
#   ember CMD --<TAB>       every long option of `ember CMD --help`
#   ember CMD --OPT <TAB>   for an option written "--OPT a|b" in the help,
#                           a and b; for --platform, kinds the help names
#   emberctl <TAB>          the commands and long options of `emberctl
#                           --help`
#   emberctl label <TAB>    the words of its "label add|rm" line
# Every difference is printed; the exit status is 1 if there is any.
set -eu
dir=$1 ember=$2 emberctl=$3
. "$dir/ember.bash"
. "$dir/emberctl.bash"

# complete FUNCTION WORDS...: what FUNCTION offers for the last word, sorted,
# one a line
complete_words() {
  local fn=$1
  shift
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  "$fn"
  [ ${#COMPREPLY[@]} -eq 0 ] || printf '%s\n' "${COMPREPLY[@]}" | sort -u
}

# help_commands: the first word of each line of the "Commands:" section
help_commands() {
  awk '/^Commands:/ { on = 1; next } on && /^$/ { exit }
       on && /^  [a-z]/ { print $1 }' | sort -u
}
# help_options: the long option each option line starts with (two to eight
# spaces, then "--x" or "-x, --x"); continuation lines are indented further
help_options() {
  sed -n 's/^ \{2,8\}\(-[A-Za-z], \)\{0,1\}\(--[a-z][a-z0-9-]*\).*/\2/p' |
    sort -u
}

fail=0
checks=0
# same WHAT GOT WANT: two sorted lists equal, or the difference printed
same() {
  checks=$((checks + 1))
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1:"
    diff <(printf '%s\n' "$3") <(printf '%s\n' "$2") |
      sed -n 's/^< /  in --help, not completed: /p; s/^> /  completed, not in --help: /p'
    fail=1
  fi
}

# ---- ember ------------------------------------------------------------------
commands=$("$ember" --help | help_commands)
[ -n "$commands" ] || { echo "FAIL: no commands in 'ember --help'"; exit 1; }
same "ember <TAB>" "$(complete_words _ember ember '' | grep -v '^-')" "$commands"
same "ember help <TAB>" "$(complete_words _ember ember help '')" \
  "$(printf '%s\n' "$commands" | grep -vx help)"
for cmd in $commands; do
  [ "$cmd" = help ] && continue
  help=$("$ember" "$cmd" --help)
  # (a bare "--", ending the options of `ember beagle`, is no option)
  same "ember $cmd --<TAB>" \
    "$(complete_words _ember ember "$cmd" -- | grep -vx -- -- || true)" \
    "$(printf '%s\n' "$help" | help_options)"
  # options whose values the help spells out as a|b|c
  printf '%s\n' "$help" |
    sed -n 's/^  \(--[a-z][a-z0-9-]*\) \([a-z0-9-]*|[a-z0-9|-]*\)\( .*\)\{0,1\}$/\1 \2/p' |
    while read -r opt values; do
      same "ember $cmd $opt <TAB>" \
        "$(complete_words _ember ember "$cmd" "$opt" '')" \
        "$(printf '%s\n' "$values" | tr '|' '\n' | sort -u)"
    done
  # --platform KIND: each kind offered is one the help names
  if printf '%s\n' "$help" | grep -q '^  --platform KIND'; then
    for kind in $(complete_words _ember ember "$cmd" --platform ''); do
      checks=$((checks + 1))
      printf '%s\n' "$help" | grep -qw -- "$kind" || {
        echo "FAIL: ember $cmd --platform <TAB> offers '$kind', which" \
             "'ember $cmd --help' does not name"
        fail=1
      }
    done
  fi
done

# ---- emberctl ---------------------------------------------------------------
help=$("$emberctl" --help)
ctl_commands=$(printf '%s\n' "$help" | help_commands)
[ -n "$ctl_commands" ] || { echo "FAIL: no commands in 'emberctl --help'"; exit 1; }
ctl_options=$(printf '%s\n' "$help" | help_options)
same "emberctl <TAB>" "$(complete_words _emberctl emberctl '' | grep -v '^-')" \
  "$ctl_commands"
same "emberctl --<TAB>" "$(complete_words _emberctl emberctl --)" "$ctl_options"
same "emberctl --json <TAB> (options first)" \
  "$(complete_words _emberctl emberctl --json '' | grep -v '^-')" "$ctl_commands"
same "emberctl label <TAB>" "$(complete_words _emberctl emberctl label '')" \
  "$(printf '%s\n' "$help" | sed -n 's/^  label \([a-z|]*\) .*/\1/p' |
     tr '|' '\n' | sort -u)"
for cmd in $ctl_commands; do
  [ "$cmd" = label ] && continue
  same "emberctl $cmd --<TAB>" "$(complete_words _emberctl emberctl "$cmd" --)" \
    "$ctl_options"
done

if [ $fail = 0 ]; then
  echo "completions: $checks checks, ember and emberctl offer what their --help lists"
fi
exit $fail
