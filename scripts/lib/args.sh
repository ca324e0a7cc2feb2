# Sourced by the scripts that take options, which set $caller_dir (the directory they were started
# from, before they cd to the repository) and $usage:
#   need_value "$@"       in an option's case: exits with $usage unless the option has a value
#   from_caller PATH      PATH as given, if absolute; else relative to $caller_dir
#   positive_number X     true if X is a number greater than 0 (e.g. 2, 0.5)
#   need_positive OPTION X   exits with $usage unless X is a positive number
need_value() {
  [ $# -ge 2 ] && [ -n "$2" ] && return 0
  echo "$1 needs a value; $usage" >&2
  exit 2
}
from_caller() {
  case $1 in
    /*) echo "$1" ;;
    *) echo "$caller_dir/$1" ;;
  esac
}
positive_number() {
  [[ $1 =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]] && awk -v x="$1" 'BEGIN { exit !(x > 0) }'
}
need_positive() {
  positive_number "$2" && return 0
  echo "$1 $2: not a positive number; $usage" >&2
  exit 2
}
