#!/usr/bin/env python3
"""Where a query's CPU time goes, by kind of work: reads `perf script` output (samples with
call stacks, leaf first) and attributes each sample to the kind of its leaf-most frame that
matches one (decimal arithmetic, aggregation, joins, WHERE evaluation, Parquet decompression,
Parquet decoding, iceberg's reader, other Arrow kernels), else "other".

  perf record -F 499 -g --call-graph dwarf,16384 -o q.data -- iceflight ... sql "<q>; <q>; ..."
  perf script -i q.data > q.txt && bench/scripts/perf_categories.py q.txt

Prints a markdown table of shares. Used by bench/reports/read-path-profile-20261201.md.
"""
import re,collections,sys
cats=[
 ('decimal arithmetic', r'Decimal128Type|decimal_op|try_binary_no_nulls|arrow_arith::numeric'),
 ('WHERE: predicate evaluation and filtering (FilterExec)', r'arrow_select::filter|FilterExec|filter_record_batch|physical_expr::expressions|arrow_ord|BooleanBuffer|BooleanArray|BitSliceIterator'),
 ('joins (hash build / probe)', r'joins::|hash_join|HashJoin|JoinHashMap'),
 ('aggregation (group by, accumulators)', r'aggregates::|groups_accumulator|hash_utils::hash_array|GroupValues|group_values'),
 ('parquet: decompression (zstd)', r'ZSTD|zstd'),
 ('parquet: decoding', r'parquet::'),
 ('iceberg reader / batch transform', r'iceberg::'),
 ('other arrow compute', r'arrow_cast|arrow_array|arrow_data|arrow_buffer|arrow_select|arrow_ord|arrow_row'),
]
counts=collections.Counter(); total=0; sample=[]
def classify(frames):
    for f in frames:
        for name,pat in cats:
            if re.search(pat,f): return name
    return 'other (allocation, runtime, kernel)'
def flush():
    global sample,total
    if not sample: return
    total+=1; counts[classify(sample)]+=1; sample=[]
for line in open(sys.argv[1]):
    if not line.strip(): flush(); continue
    if line.startswith(('\t',' ')): sample.append(line.strip())
    else: flush()
flush()
for k,v in counts.most_common(): print(f"| {k} | {100*v/total:.1f} % |")
print(f"({total} samples)")
