"""Training (notebooks 09, 11, 15 and 17): one loop for every model the course trains, and what it needs.

* :mod:`.loop`: the one training loop and its entry points for a sequence-to-sequence model, for any model with a
  loss function, and evaluation by greedy decoding (09, 11).
* :mod:`.losses`: cross-entropy against label-smoothed targets; :mod:`.schedules`: learning-rate schedules and the
  optimizer factory (09).
* :mod:`.distributed`: several processes (DistributedDataParallel) and mixed precision around the same step (09).
* :mod:`.checkpoints` and :mod:`.recipes`: save and load a trained Transformer; the course's recipe in one call (09,
  10).
* :mod:`.lm_training`: a language model trained on random windows of one long text (15).
* :mod:`.lora`: LoRA, a low-rank update beside each frozen weight, merged back into it after training (17).
"""
