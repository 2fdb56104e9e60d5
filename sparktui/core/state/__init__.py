"""A deployment's state and what the core reports: the snapshot, its enums, the journal, the events.

Everything here is data the fronts read or the core writes back: where a deployment stands, what
was run on which node, and the files kept between runs.

- `deployment` — `Deployment`, one snapshot of a deployment: its record fields and its live fields
- `states` — the vocabularies as enums: `State`, `Op`, `Phase`, `MilestoneKind`, `ProblemKind`, and the
  preflight's `CheckKind` (str enums: JSON and the journal read the plain words)
- `events` — the events the core emits (`EventBus`); the TUI turns them into messages, the CLI prints them
- `words` — those vocabularies in plain words (milestones, phases, problem and check kinds,
  operations), for every front
- `journal` — every remote command run: node, time, command (secrets masked), exit code, duration
- `statefile` — the one loader for state files read back (journal lines, records, transfer meta, caches)
- `labels` — the docker labels on every container sparktui starts, named once
"""
