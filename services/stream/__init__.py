"""Stream: WatchJob. One Redis subscription per process, fanned out to watchers in memory."""
