"""The request path: what one user sends, how its stream is read and timed, what it records.

Runs on the gevent hub of the process that times requests, so it never imports pandas or
matplotlib. Arrows point down this list:

- :mod:`.conversation` — ``ConversationUser``: multi-turn chats, history resent, think time;
- :mod:`.users` — the Locust user classes (``ChatUser``, ``CompletionsUser``, batch);
- :mod:`.state` — what all users of one process share: options, prompt source, model, calibration;
- :mod:`.tokenize_probe` — prompt words chosen with the server's own tokenize endpoint;
- :mod:`.payloads` — the JSON bodies for ``/v1/chat/completions`` and ``/v1/completions``;
- :mod:`.reconnect` — resend once on a fresh socket when a pooled keep-alive socket was dead;
- :mod:`.streamread` — read an SSE stream off its socket, each line stamped when it arrived;
- :mod:`.sse` — parse a streamed or whole OpenAI response into what the request produced;
- :mod:`.outcome` — decide the request's outcome and build its ``requests.csv`` row (pure);
- :mod:`.timing` — e2e, TTFT, ITL and TPOT from raw stamps (pure).
"""
