"""Before the Transformer (notebooks 01 and 02): what it replaced and what it starts from.

* :mod:`.rnn`: recurrent cells written out by hand, their gradients over time, and a long-range recall task (01).
* :mod:`.serial_cost`: the work a recurrent layer and an attention layer do per sequence, counted from the shapes
  and in operator calls, and their timings (01).
* :mod:`.word2vec`: skip-gram and CBOW with negative sampling, the embeddings a Transformer's first layer learns (02).
"""
