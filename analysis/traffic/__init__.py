"""A log's traffic before any load: arrivals, in-flight concurrency, lengths, headroom to a knee."""
