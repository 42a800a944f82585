# Links whose target depends on who looks: the supervisor, which stats for
# the agent, must never answer for itself. Descriptor 5 is old.txt here; in
# the supervisor it is something else.
set -e
exec 5<old.txt
ln -s /proc/self/fd/5 self5
stat -L -c 'self5 %F %s' self5
stat -L -c 'fd5 %F %s' /dev/fd/5
ln -s /proc/self selfdir
stat -L -c 'selfdir %F' selfdir
echo made >new.txt
stat -c 'new %y' new.txt
