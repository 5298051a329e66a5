# bash completion for ember (installed as
# share/bash-completion/completions/ember). Options are those of
# `ember COMMAND --help`.
_ember() {
  local cur prev cmd i
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  cmd=
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      -*) ;;
      *) cmd=${COMP_WORDS[i]}; break ;;
    esac
  done
  case $prev in
    --query|--ref|--out|--matrix|--alignment|--trees|--rates|--site-lnl|\
    --net|--save|--load|--plot)
      COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null
      return ;;
    --data)
      COMPREPLY=($(compgen -d -- "$cur")); compopt -o filenames 2>/dev/null
      return ;;
    --platform|--prefer)
      COMPREPLY=($(compgen -W "cpu opencl fpga-emu" -- "$cur")); return ;;
    --type)
      COMPREPLY=($(compgen -W "dna protein" -- "$cur")); return ;;
    --precision)
      COMPREPLY=($(compgen -W "double single" -- "$cur")); return ;;
    --model)
      COMPREPLY=($(compgen -W "JC F81 K80 HKY GTR LG WAG JTT" -- "$cur"))
      return ;;
    --nam|--gam|--label|--match|--mismatch|--gap-open|--gap-extend|\
    --threads|--instances|--reconnect-window|--max-vectors|--epochs|--batch|\
    --micro-batch|--lr|--momentum|--decay|--stages|--nodes|--seed|\
    --train-limit|--test-limit)
      return ;;
  esac
  case $cmd in
    "")
      COMPREPLY=($(compgen -W "align lnl train accelerators beagle help
                   --help --version" -- "$cur")) ;;
    align)
      COMPREPLY=($(compgen -W "--query --ref --protein --match --mismatch
        --matrix --gap-open --gap-extend --nam --embedded --gam --label
        --threads --platform --prefer --no-fallback --reconnect-window --out
        --json --timings --help" -- "$cur")) ;;
    lnl)
      COMPREPLY=($(compgen -W "--alignment --trees --model --type --rates
        --site-lnl --max-vectors --precision --platform --nam --embedded
        --threads --instances --json --help" -- "$cur")) ;;
    train)
      COMPREPLY=($(compgen -W "--net --data --epochs --batch --micro-batch
        --lr --momentum --decay --stages --platform --nam --gam --nodes
        --embedded --sync --layers-only --fixed-splits --plan --save --load --plot --json
        --seed --train-limit --test-limit --help" -- "$cur")) ;;
    accelerators)
      COMPREPLY=($(compgen -W "--nam --embedded --json --help" -- "$cur")) ;;
    beagle)
      # after the program's name (or --), the program's own words
      for ((i = i + 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
          --) COMPREPLY=($(compgen -c -- "$cur")); return ;;
          --nam) i=$((i + 1)) ;;
          -*) ;;
          *) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        esac
      done
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "--nam --embedded --print-libdir --help --" \
                     -- "$cur"))
      else
        COMPREPLY=($(compgen -c -- "$cur"))
      fi ;;
    help)
      COMPREPLY=($(compgen -W "align lnl train accelerators beagle" -- "$cur")) ;;
  esac
}
complete -F _ember ember
