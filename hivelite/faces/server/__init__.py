"""``hivelite serve``: the HTTP service (seed 004's routes), from the ``server`` extra.

``pip install 'hivelite[server]'`` brings Starlette, uvicorn and the ``mcp`` SDK; the
core library never imports this package. ``app.create_app`` builds the service,
``routes.ROUTES`` lists what it serves, ``openapi`` documents it.
"""
