"""The 2000 US standard population in 19 age groups (typed from the published tables).

Source: the Census Bureau's projection of the 2000 US population (P25-1130) as adopted by
NCHS for age adjustment: Klein RJ, Schoenborn CA. "Age adjustment using the 2000
projected U.S. population." Healthy People 2010 Statistical Notes, no. 20. Hyattsville,
MD: National Center for Health Statistics, January 2001; and the 19-group table that the
NCI SEER program publishes as "2000 US Std Population (Census P25-1130)". In NCHS's
11-group table (Statistical Notes 20, Table 1) the same numbers appear rounded to
thousands, summing to 274,634,000; tests/test_data_standard_population.py checks that
these 19 groups aggregate to those 11 published values.

Rows: (first age, last age or None for the open group, persons).
"""

US_2000_STANDARD_19 = [
    (0, 0, 3_794_901),
    (1, 4, 15_191_619),
    (5, 9, 19_919_840),
    (10, 14, 20_056_779),
    (15, 19, 19_819_518),
    (20, 24, 18_257_225),
    (25, 29, 17_722_067),
    (30, 34, 19_511_370),
    (35, 39, 22_179_956),
    (40, 44, 22_479_229),
    (45, 49, 19_805_793),
    (50, 54, 17_224_359),
    (55, 59, 13_307_234),
    (60, 64, 10_654_272),
    (65, 69, 9_409_940),
    (70, 74, 8_725_574),
    (75, 79, 7_414_559),
    (80, 84, 4_900_234),
    (85, None, 4_259_173),
]
