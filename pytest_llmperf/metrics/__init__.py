"""Request records -> a Result: metric definitions, statistics, goodput, cost, roofline."""
