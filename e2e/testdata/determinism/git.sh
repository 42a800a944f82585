# Two commits: their ids hold the author and committer dates.
set -e
git -c init.defaultBranch=main init -q repo
cd repo
commit() { git -c user.name=probe -c user.email=probe@example.com commit -q --allow-empty -m "$1"; }
commit first
echo "fixed commit1 $(git rev-parse HEAD)"
commit second
echo "fixed commit2 $(git rev-parse HEAD)"
git log -1 --date=raw --format='fixed dates %ad %cd'
