# mktemp and uuidgen. A creating mktemp names its file from a stack address
# and the monotonic clock, drawing getrandom only when that value is
# unfair: "any" says a seed change may or may not change it.
echo "any mktemp $(mktemp)"
echo "any mktemp_d $(mktemp -d)"
echo "random mktemp_u $(mktemp -u)"
echo "random uuidgen $(uuidgen)"
echo "random uuidgen_r $(uuidgen -r)"
