"""Running notebooks: profiles and their caps, parameter checks, recorded results, plots and the claims ledger."""
