"""Running judges over items: the one run API (``judge_items``), its executors (threads, processes, batch, Ray)
and the SQLite run store they all write through."""
