"""A launch plan: what will run where, checked before any node is touched, and what it rests on.

`plan.make_plan` is pure: it reads the config, the node facts and the subnets; the modules beside it
answer its questions about the model, the image and the memory.

- `plan` — `make_plan`: engine, image, model, TP/PP, rendezvous, ports -> checked per-node commands
- `collectives` — which collective carries the TP all-reduces across nodes, and what that changes
- `files` — small files a plan carries into its containers (a recipe's chat template, a config)
- `sizing` — the KV cache in bytes and the context length fitted by the engine, where the release can
- `fit` — will the model fit: weights per GPU against the memory the engine may use
- `modelconfig` — the model's config.json, read from the node holding it and checked
- `image` — what an engine image holds: entrypoint, labels, ID, the engine release inside
- `image_community` — community images known by name and what the name tells before inspection
- `support` — will this image serve this model: asked of the image itself, on the head
- `export` — a plan as plain POSIX shell scripts, one per node, with a README
"""
