"""The user's configuration: the YAML file read and written, first-run setup, typed values checked.

Every error names where it is (FILE:LINE:COL) and what was expected; secrets are told apart and
masked here before any line leaves the process.

- `config` — `Config`: the cluster YAML in, typed and validated objects out (`ConfigError`)
- `configwrite` — a Config back to commented YAML; `NOTES`, the comment on every key (docs/config.md)
- `yamlpos` — YAML with positions: checked values, errors pointing at the key or value at fault
- `firstrun` — `sparktui init` and the setup screen: nodes tested over SSH, probed, turned into a Config
- `argcheck` — checks of option values typed on a command line or in a form, before any node is asked
- `secrets` — what is secret (by name) and the masking every journal line and record passes through
"""
