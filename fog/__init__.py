"""The fog-node agent: watch auctions, bid, train the jobs won, commit update hashes."""
