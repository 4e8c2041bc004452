"""The raw floors of the backends this project ships, one module per backend.

Each module imports its adapter (and so its driver): it is imported only when
``agentstores bench`` measures that backend, through :data:`agentstores_tools.bench.floor.FLOORS`.
"""
