"""CLI command `scijudge serve-fake`: a fake OpenAI-compatible judge model on 127.0.0.1, to try the API paths
(judge, --mode decision, --executor async, --cascade, faults and retries) without a key or a network."""

from __future__ import annotations

from typing import Annotated

import typer


def serve_fake_cmd(
    port: Annotated[int, typer.Option("--port", min=0, max=65535,
                                      help="Port on 127.0.0.1 (0: any free port, printed at start).")] = 8765,
    latency: Annotated[float, typer.Option("--latency", min=0.0,
                                           help="Seconds added before every answer, like a remote provider.")] = 0.0,
    fault_rate: Annotated[float, typer.Option("--fault-rate", min=0.0, max=1.0,
                                              help="Share of requests answered with HTTP 503, to watch the chain "
                                                   "retry.")] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="Changes every answer (the same prompt and seed always get "
                                                     "the same answer).")] = 0,
) -> None:
    """Serve a fake OpenAI-compatible judge model on 127.0.0.1 until Ctrl-C: its answers fit each request's schema
    and mean nothing.

    Every request goes through the real client, HTTP and fallback chain, so judge, decision mode, the asyncio
    executor, cascades and fault handling can be tried offline. Structured requests get a value drawn from their
    JSON schema (a hash of the prompt picks it); decision requests get a distribution over the levels 1-5.

    Example: scijudge serve-fake --port 8765   (then, in another shell: OPENAI_API_KEY=fake scijudge judge datasets/yescieval_example/items.jsonl -j yescieval.qa.correctness -m openai/fake --api-base http://127.0.0.1:8765/v1 --run runs/fake.sqlite)
    """
    import time

    from scijudge.report.console import plain_console

    from scijudge.errors import InputError
    from scijudge.testing.fake_model import FakeModel
    from scijudge.testing.openai_server import OpenAICompatServer

    server = OpenAICompatServer(FakeModel(seed=seed, fault_rate=fault_rate), latency=latency, port=port)
    try:
        server.start()
    except OSError as exc:
        raise InputError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}", field="--port") from None
    console = plain_console()
    console.print(f"serving a fake judge model at {server.url} (answers mean nothing; Ctrl-C stops it)\n"
                  f"try: OPENAI_API_KEY=fake scijudge judge datasets/yescieval_example/items.jsonl "
                  f"-j yescieval.qa.correctness -m openai/fake --api-base {server.url} --run runs/fake.sqlite",
                  highlight=False, soft_wrap=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        console.print(f"stopped after {server.count} requests", highlight=False)
    finally:
        server.stop()
