// Where the kernels' threads run on a machine of several NUMA nodes, as
// llama.cpp's --numa (process-wide, set once before contexts are made):
//   distribute  thread i on node i % nodes (each node's CPUs), so the threads
//               and the memory they first touch are spread over every node;
//   isolate     every thread on the node the setting was made from;
//   numactl     every thread on the CPUs the process was given (numactl's
//               --physcpubind / --cpunodebind), as at the setting.
// Without it threads go where the scheduler puts them. The nodes are read
// from /sys/devices/system/node (one node of every allowed CPU where absent).
#ifndef INFER_BASE_NUMA_H
#define INFER_BASE_NUMA_H

enum { NUMA_NONE, NUMA_DISTRIBUTE, NUMA_ISOLATE, NUMA_NUMACTL };

// Sets the strategy (reading the nodes); 0, or -1 when the CPUs could not be read.
int numa_set(int strategy);
// The same with the nodes read from dir/nodeN/cpulist (tests: a made-up machine)
int numa_set_from(int strategy, const char *dir);
int numa_strategy(void);
int numa_node_count(void);   // nodes with allowed CPUs (after numa_set; 1 before)
// Pins the calling thread as thread ith of a pool; 0, or -1 where refused.
// Nothing (0) under NUMA_NONE.
int numa_pin(int ith);

#endif
