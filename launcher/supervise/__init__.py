"""What runs beside the workload, inside images or around a native process.

Standard library only: it is copied into images whose Python has nothing else installed.
"""
