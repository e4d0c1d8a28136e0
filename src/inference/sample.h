// Sampling: the llama.cpp chain, in its order: penalties -> top-k -> top-p ->
// min-p -> temperature -> draw. temp <= 0 is greedy.
#ifndef INFER_INFERENCE_SAMPLE_H
#define INFER_INFERENCE_SAMPLE_H

#include "infer.h"

#endif
