"""The REST forecasting service: FastAPI in front of ``tsfm.predict``, with micro-batching across requests.

``tsfm.serving.app.create_app(model=..., **settings)`` builds the app; ``tsfm serve`` runs it with uvicorn
(``tsfm.serving.server.run``). One module per job: ``settings`` (configuration, ``TSFM_*`` environment variables),
``schemas`` (request and response models, limits as validation), ``registry`` (the loaded model and its warm-up),
``batching`` (requests -> model batches off the event loop), ``limits`` (body size), ``auth`` (API key),
``metrics`` (Prometheus) and ``page/`` (the forecast page at ``/``).

This package imports ``tsfm``; ``tsfm`` never imports it (except the ``serve`` command, lazily), so the core stays
free of web dependencies. FastAPI and friends come with the ``serve`` extra.
"""
