"""Shell functions about a remote job's process group, shared by the jobs that run detached on a node
(model copies, the benchmark client)."""

# any live (non-zombie) process in group $g? /proc is read with the shell's own `read` (no fork
# per process); without /proc, kill -0 on the group (which counts zombies, so it errs on "alive")
GROUP_ALIVE_FN = (
    "galive() { if [ -d /proc/self ]; then for s in /proc/[0-9]*/stat; do "
    'read -r l < "$s" 2>/dev/null || continue; r=${l##*) }; set -- $r; '
    '[ "$1" != Z ] && [ "$3" = "$g" ] && return 0; done; return 1; fi; kill -0 -"$g" 2>/dev/null; }'
)
