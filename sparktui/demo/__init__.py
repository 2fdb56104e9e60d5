"""The simulated cluster behind `sparktui demo` (rootless, on 127.0.0.1)."""
