"""Report assembly: join the sources, summarize arrays, attach the findings."""
