"""Runs: a plan's rows as training runs and back (launch, collect, the runs table, status); everything here reads or
writes run directories, nothing here fits.
"""
