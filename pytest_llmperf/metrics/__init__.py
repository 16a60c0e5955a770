"""Request records -> a Result: every metric's definition (registry), statistics, goodput,
cost, roofline, per-GPU numbers, energy per token, the engine's own phase timings (histograms,
phases), speculative decoding's acceptance, by-turn and timeline views.

May import: failures, model_files, records, errors, ids, numbers, machine/ and secrets; nothing
that measures (client/, engines/) or judges (verdict/).
"""
