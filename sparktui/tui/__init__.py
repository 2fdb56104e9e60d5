"""The Textual front end. Data flows one way: core event -> controller -> Textual message -> widget.

app.py          SparkApp(config, theme=None, controller=None): panes, keys, notifications
controller.py   Controller: owns the Cluster, Deployer and transfers on a core thread; posts messages
actions.py      the one key registry (bindings with ids, help, palette, greyed-out keys)
messages.py     the messages core events become
present/        pure functions: facts and events -> text
panes/ forms/ screens/ widgets/   what is drawn; none of it talks to a node
theming.py      YAML themes (theme_files/, ~/.config/sparktui/themes/) -> textual Theme
"""
