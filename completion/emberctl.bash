# bash completion for emberctl (installed as
# share/bash-completion/completions/emberctl). Options are those of
# `emberctl --help`.
_emberctl() {
  local cur prev cmd i
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  case $prev in
    -t|--token-file)
      COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null
      return ;;
    -g|--gam|--timeout) return ;;
  esac
  cmd=
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      -t|--token-file|-g|--gam|--timeout) ((i++)) ;;
      -*) ;;
      *) cmd=${COMP_WORDS[i]}; break ;;
    esac
  done
  local opts="--gam --token-file --json --timeout --help --version"
  case $cmd in
    "")
      COMPREPLY=($(compgen -W "status nodes node label drain undrain apps
        events $opts" -- "$cur")) ;;
    label)
      if [ "$prev" = label ]; then
        COMPREPLY=($(compgen -W "add rm" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
      fi ;;
    *)
      COMPREPLY=($(compgen -W "$opts" -- "$cur")) ;;
  esac
}
complete -F _emberctl emberctl
