print("engine bench: not yet written")
