# Deny pushing with git, and a recursive rm of / or of a directory at its
# top (/etc, /home, /*), anywhere in the agent's process tree: the exec
# fails with EACCES ("Permission denied"), the agent goes on, and the
# bundle lists the decision.
#
#   dal-exec record --policy examples/policies/deny-git-push.rego --out run1 -- ./agent.sh
#
# What it catches:
#   - git's push subcommands, push and send-pack, however git is named
#     (git, /usr/bin/git, /usr/lib/git-core/git) and after git's global
#     options (git -c k=v -C dir --git-dir=x push ...); the git-push and
#     git-send-pack programs run directly; an alias defined on the command
#     line whose expansion pushes (git -c alias.p=push p); ssh running
#     git-receive-pack on a server (git push over ssh); and any HTTP client
#     pushing through dal's proxy with git's smart HTTP protocol (a request
#     to .../git-receive-pack, which is what git push over https sends,
#     and libgit2, dulwich or curl alike).
#   - rm with -r, -R or --recursive (alone or in a cluster: -rf, -fr, -Rf,
#     -r -f, --recursive --force) and a target, absolute or relative to the
#     working directory, that is / (also //, /., /*) or one entry at its
#     top (/etc, /home/, or bin from /); options after -- are targets.
#
# What it does not catch:
#   - an alias or push configuration from a git config file (~/.gitconfig,
#     .git/config: git p with alias.p=push): git expands it internally;
#   - a push over git:// or ssh by a program that is not ssh (a library
#     speaking the protocol itself), and an HTTP push sent outside dal's
#     proxy (the sandbox blocks direct connections, so it fails anyway);
#   - paths with .. (rm -rf /tmp/..) or symbolic links resolving to /, rm
#     run through another program that deletes itself (busybox rm, find /
#     -delete, python's shutil.rmtree, a script), and globs a shell expanded
#     into deeper paths (rm -rf /usr/*: each target is two levels deep).
package dal

program := base if {
	parts := split(input.path, "/")
	base := parts[count(parts) - 1]
}

# git's global options that take the next argument as their value.
git_opts_with_value := {"-c", "-C", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--attr-source", "--exec-path"}

# git's subcommand: the first argument that is neither one of git's
# global options nor the value of one.
git_subcommand := input.argv[min(candidates)] if {
	candidates := {i |
		some i, a in input.argv
		i > 0
		not startswith(a, "-")
		not git_opts_with_value[input.argv[i - 1]]
	}
	count(candidates) > 0
}

git_pushes := {"push", "send-pack"}

pushes if {
	program == "git"
	git_pushes[git_subcommand]
}

pushes if program in {"git-push", "git-send-pack"}

# git -c alias.NAME=push ... NAME: an alias from the command line.
pushes if {
	program == "git"
	some i, opt in input.argv
	opt in {"-c", "--config-env"}
	parts := split(input.argv[i + 1], "=")
	startswith(lower(parts[0]), "alias.")
	value := concat("=", array.slice(parts, 1, count(parts)))
	some word in split(trim_left(value, "!"), " ")
	word in git_pushes
}

pushes if {
	program == "ssh"
	some arg in input.argv
	contains(arg, "git-receive-pack")
}

decision := {"action": "deny", "reason": "git push is not allowed for agents"} if {
	input.kind == "exec"
	pushes
}

# git's smart HTTP push: GET .../info/refs?service=git-receive-pack, then
# POST .../git-receive-pack.
decision := {"action": "deny", "reason": "git push is not allowed for agents"} if {
	input.kind == "http"
	endswith(input.path, "/git-receive-pack")
}

decision := {"action": "deny", "reason": "git push is not allowed for agents"} if {
	input.kind == "http"
	"git-receive-pack" in input.query.service
}

# rm's options come before its first --; everything after it is a target.
dashdash := {i | some i, a in input.argv; a == "--"}

rm_end := min(dashdash) if count(dashdash) > 0

rm_end := count(input.argv) if count(dashdash) == 0

rm_option(a) if {
	startswith(a, "-")
	a != "-"
}

# -r, -R, in a cluster (-rf, -fr, -Rf), or --recursive as GNU getopt
# takes it, abbreviated too (--rec).
rm_recursive if {
	some i, a in input.argv
	i > 0
	i < rm_end
	regex.match(`^-[a-zA-Z]*[rR]`, a)
}

rm_recursive if {
	some i, a in input.argv
	i > 0
	i < rm_end
	count(a) >= 3
	startswith("--recursive", a)
}

rm_targets contains t if {
	some i, t in input.argv
	i > 0
	i < rm_end
	not rm_option(t)
}

rm_targets contains t if {
	some i, t in input.argv
	i > rm_end
}

# The target as an absolute path (relative ones against the working
# directory).
absolute(t) := t if startswith(t, "/")

absolute(t) := concat("/", [trim_right(input.cwd, "/"), t]) if not startswith(t, "/")

# / itself, or one entry at its top: /, //, /., /*, /etc, /home/.
at_top(p) if regex.match(`^/+([^/]+)?/*$`, p)

decision := {"action": "deny", "reason": "rm -r of / or of a directory at its top is not allowed"} if {
	input.kind == "exec"
	program == "rm"
	rm_recursive
	some t in rm_targets
	at_top(absolute(t))
}
