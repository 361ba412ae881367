"""The rules a request is checked against, one home each: submits, edits, reads with their
visibility, groups, admin changes. The API calls it; it writes through the store. May
import the Slurm front, the engine and every layer below.
"""
