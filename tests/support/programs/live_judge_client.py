"""Ask one live judge child from greenlets, as the Locust side does: ``python … RUN_DIR``.

Run in a child process: it monkey-patches the interpreter with gevent, as Locust does. Asks twice
for ``RUN_DIR`` (one child must answer both), once for a missing run, while a ticker greenlet
counts that the hub kept running; prints one JSON object of observations for the test to judge.
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402

from loadknee_locust.sweep.judge import LiveJudge  # noqa: E402

judge = LiveJudge()
judge.start()
ticks: list[int] = []


def tick() -> None:  # the hub must keep running while the judge works
    while True:
        ticks.append(1)
        gevent.sleep(0.01)


ticker = gevent.spawn(tick)
first = gevent.spawn(judge.ask, sys.argv[1]).get()
pid = judge._proc.pid
second = gevent.spawn(judge.ask, sys.argv[1]).get()
same = judge._proc.pid == pid
missing = judge.ask(sys.argv[1] + "-missing")
judge.close()
ticker.kill()
print(
    json.dumps(
        {
            "first": first.max_concurrency,
            "second": second.knee_users,
            "same_child": same,
            "missing": missing,
            "ticks": len(ticks),
            "closed": not judge.running,
        }
    )
)
