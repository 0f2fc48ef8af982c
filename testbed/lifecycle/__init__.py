"""What a run creates and how it ends: the registry of what is about to be created, removing it
again, signals turned into a clean stop, work spread over the cores, and the progress a person
watches."""
