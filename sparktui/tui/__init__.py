"""The Textual front end. Data flows one way: core event -> controller -> CoreEvent message -> the widget
that owns the data (then the flow and the app's own reactions).

app.py          SparkApp(config, theme=None, controller=None): panes, keys, notifications
controller.py   Controller: owns the Cluster, Deployer and transfers on a core thread; posts messages
routing.py      @handles(EventType) marks each event's handlers; Router delivers an event to them in order
flow.py         OperationsFlow: what the operation keys do (prepare, preflight, confirm, run), held by the app
actions.py      the one key registry (bindings with ids, help, palette, greyed-out keys)
messages.py     CoreEvent (every core event, as it is) and the flow's own messages
present/        pure functions: facts and events -> text
panes/ forms/ screens/ widgets/   what is drawn; none of it talks to a node
theming.py      YAML themes (theme_files/, ~/.config/sparktui/themes/) -> textual Theme
"""
