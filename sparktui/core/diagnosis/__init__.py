"""Engine logs read as they arrive: how far a start got, what went wrong, and what to do about it.

Pure: lines and the time go in, milestones and problems come out. Silence is judged per start-up
phase, so a rendezvous hang is told from a slow load.

- `diagnose` — `Diagnoser`: lines -> milestones and problems; `tick()` judges silence (the rendezvous hang)
- `diagnose_batch` — `Diagnoser.feed_batch`: a batch of one node's lines, as feed() per line would
- `phases` — the start-up phases of a distributed engine and how far each rank got
- `logevents` — what diagnosis reports: `Milestone`, `Problem`, withdrawn problems, line helpers
- `logfile` — a saved log diagnosed in bounded memory (`sparktui diagnose FILE`)
- `dockerts` — docker's `logs -t` timestamp prefix, parsed once
- `quickre` — compiled patterns that skip the regex engine on text that cannot match
"""
