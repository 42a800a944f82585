# Makes files, then looks at them with the tools agents use: every line
# must repeat from run to run. $1 is the Python interpreter, $2 cstat.c
# and $3 gostat built.
set -e
py=$1
echo "date $(date +%s)"
mkdir -p newdir/sub
echo hello >newdir/a.txt
echo world >newdir/sub/b.txt
ln -s a.txt newdir/link
# A link the agent planted, to a file it may not even read: a stat that
# does not follow it sees the link.
ln -s /etc/shadow planted
# And one to a FIFO no one writes: opening it would hang.
mkfifo fifo
ln -s fifo planted-fifo
sleep 1
echo again >>newdir/a.txt
ls -l --time-style=full-iso newdir newdir/sub old.txt
ls -li newdir
stat newdir/a.txt newdir/link newdir/sub planted
stat -c '%n %y' old.txt
stat -L -c '%n %F %i %y' planted-fifo
"$py" - <<'PY'
import os, stat
for p in ["newdir/a.txt", "newdir/link", "newdir/sub", "planted"]:
    s, l = os.stat(p) if p != "planted" else None, os.lstat(p)
    if s:
        print("python stat", p, s.st_dev, s.st_ino, s.st_atime_ns, s.st_mtime_ns, s.st_ctime_ns)
    print("python lstat", p, l.st_dev, l.st_ino, l.st_mtime_ns, l.st_ctime_ns, stat.filemode(l.st_mode), l.st_size)
fd = os.open("newdir", os.O_RDONLY)
print("python fstatat", os.stat("link", dir_fd=fd, follow_symlinks=False).st_ino, os.fstat(fd).st_mtime_ns)
print("python old", os.stat("old.txt").st_mtime_ns)
PY
node -e '
const fs = require("fs");
for (const p of ["newdir/a.txt", "newdir/sub"]) {
  const s = fs.statSync(p, {bigint: true});
  console.log("node", p, s.mtimeNs, s.ctimeNs, s.birthtimeNs, s.ino, s.dev);
}
console.log("node old", fs.statSync("old.txt", {bigint: true}).mtimeNs);
const l = fs.lstatSync("planted", {bigint: true});
console.log("node lstat planted", l.isSymbolicLink(), l.size, l.mtimeNs, l.ino);
const fd = fs.openSync("newdir/a.txt");
console.log("node fstat", fs.fstatSync(fd, {bigint: true}).mtimeNs);
'
"$2" newdir/a.txt
"$3" newdir/a.txt
echo "tar $(tar cf - newdir | sha256sum)"
git -c init.defaultBranch=main init -q repo
cp -p newdir/a.txt repo/
cd repo
git add a.txt
git -c user.name=probe -c user.email=probe@example.com commit -q -m files
echo "git $(git log --format=%H)"
git status --porcelain
git ls-files --debug
