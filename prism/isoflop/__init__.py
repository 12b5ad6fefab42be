"""IsoFLOP study: calibrate, plan, forecast, collect, fit, report, plot."""
