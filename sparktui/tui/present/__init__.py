"""Presentation as pure functions: core facts and events in, plain strings and Rich Text out.

Nothing here touches a widget or the network, so every function is unit-tested on its own.
"""
