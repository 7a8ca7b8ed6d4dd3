// pingpong_consumers.cu: pingpong's turns over fused_consumers' producers,
// which only pass each chunk along: the consumers' chain alone, taking
// turns. The program is fused_consumers.cu, pingpong.cu and this file, in
// that order (kernsrc/lab's Experiment.Uses). Its outputs are wrong (the
// producers do none of their work); its time beside fused_consumers' (the
// same chain without turns) tests the turns' premise: that the two groups'
// products collide on the tensor pipe today.
#include "hopper_kernel.cuh"

template <class Cfg>
struct PingPongConsumersOnly : TurnConsumers<Cfg, ConsumersOnly<Cfg>> {};
