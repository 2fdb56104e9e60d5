"""The four panes: nodes, transfers, launch, journal. Each renders what the app hands it."""
