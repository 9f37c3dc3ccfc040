"""The bottom layer: paths, records, the call cache, answer metrics with their intervals, text splitting and citations."""
