"""The dashboard's screens: the queue (main), a run's detail, and the dialogs."""
